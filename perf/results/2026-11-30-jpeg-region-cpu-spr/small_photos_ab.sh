#!/bin/bash
# A/B of the region layout on tiny photos (Fashion-MNIST at 64x64, gray), as e2e_jpeg_fashion_mnist prepares them.
set -e
cd /tmp && rm -rf tiny && mkdir tiny && cd tiny
/usr/bin/python3 /work/main/tests/support/write_fashion_mnist_folder.py /usr/share/datasets/fashion-mnist photos jpeg 64 >/dev/null
B=/work/main/build-gpu/bin/ringtrain
for v in region:"" plain:--keep-jpeg-bytes; do n=${v%%:*}; f=${v#*:}
  /usr/bin/time -f "$n prepare %e s %U user" $B prepare images --source photos/train --test-source photos/test --size 28 --channels 1 --store jpeg --shards 4 --threads 1 --out $n $f 2>&1 | grep -E "prepare|images/s" | cut -c1-200
done
for rep in 1 2; do for n in region plain; do echo -n "$n "; $B input-bench /work/main/jobs/fashion_mnist.toml --set data.train=/tmp/tiny/$n/train --set data.test=/tmp/tiny/$n/test --set data.augment=resized_crop_flip --set data.augment_min_area=0.5 --threads 1 --batches 200 --warmup 3 2>/dev/null | grep -oE '"images_per_cpu_s":[0-9.]*'; done; done
