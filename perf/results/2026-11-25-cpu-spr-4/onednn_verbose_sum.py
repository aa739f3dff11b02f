# Sums oneDNN's verbose lines (ONEDNN_VERBOSE=1 on stdin) by primitive, layouts and shape: calls and mean ms.
import sys, collections
tot = collections.defaultdict(float); cnt = collections.Counter()
for line in sys.stdin:
    if not line.startswith('onednn_verbose,exec'): continue
    f = line.strip().split(',')
    key = (f[3], f[5], f[6], f[9])
    tot[key] += float(f[10]); cnt[key] += 1
for k in sorted(tot, key=lambda k: -tot[k])[:14]:
    print(f"{cnt[k]:4d} {tot[k]/cnt[k]:7.3f} ms  {k[0]} {k[1]} {k[2][:70]} {k[3][:40]}")
