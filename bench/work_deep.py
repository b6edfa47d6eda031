# Allocations 30 Python calls deep (bench/python_frames.sh): each leaf builds
# small objects, so every allocation's path has ~35 Python frames to read.
def leaf(n):
    return [str(i) for i in range(n)], {"n": n, "k": (n, n + 1)}


def descend(depth, n):
    if depth == 0:
        return leaf(n)
    return descend(depth - 1, n)


total = 0
for round in range(20000):
    items, info = descend(30, 40)
    total += len(items) + len(info)
print(total)
