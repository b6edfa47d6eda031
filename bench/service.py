# The service bench/service_attach.sh and bench/snapshots.sh attach to: builds small dicts as fast
# as it can (run with PYTHONMALLOC=malloc, each allocation is a malloc) and
# publishes how many it has built in the 8-byte counter file argv[1].
import mmap, struct, sys

with open(sys.argv[1], "r+b") as f:
    counter = mmap.mmap(f.fileno(), 8)
built = 0
while True:
    for i in range(1000):
        d = {"id": i, "name": str(i), "tags": [i, i + 1]}
    built += 1000
    counter[0:8] = struct.pack("<Q", built)
