# Medians, ranges and paired ratios of a compare_models_cpu.py results file: python3 summarise.py results.jsonl
import json, statistics, sys
from collections import defaultdict
rows = [json.loads(l) for l in open(sys.argv[1])]
runs = defaultdict(list); per_repeat = defaultdict(dict)
for r in rows:
    if "samples_per_s" not in r: continue
    key = (r['framework'], r['variant'], r['precision'])
    runs[key].append(r['samples_per_s']); per_repeat[r['repeat']][key] = r['samples_per_s']
print('| framework | variant | precision | median samples/s | range |')
print('|---|---|---|---|---|')
for k, v in runs.items():
    print(f'| {k[0]} | {k[1]} | {k[2]} | {statistics.median(v):.1f} | {min(v):.1f} - {max(v):.1f} |')
def best(fw):
    return max(((statistics.median(v), k) for k, v in runs.items() if k[0] == fw))
rt = best('ringtrain')
print(f'\nringtrain best: {rt[1]} {rt[0]:.1f}')
for fw in ('pytorch', 'keras'):
    b = best(fw)
    paired = [rep[rt[1]] / rep[b[1]] for rep in per_repeat.values() if rt[1] in rep and b[1] in rep]
    print(f'{fw} best: {b[1]} {b[0]:.1f}; ringtrain best / it = {rt[0]/b[0]:.2f}x; paired per repeat {", ".join(f"{p:.2f}" for p in sorted(paired))}')
