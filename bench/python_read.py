"""Calls python_read.c's read_frames() ROUNDS times at DEPTH Python frames,
from two lines of one loop, as two native paths: each read finds the
innermost frame at another instruction, the frames outside it as the last
read left them, under another native path (an allocation loop's pattern).
Usage: python_read.py LIBRARY DEPTH ROUNDS"""
import ctypes
import sys

library = ctypes.CDLL(sys.argv[1])
if library.open_interpreter() != 1:
    sys.exit("the interpreter's frames cannot be read")
read = library.read_frames


def leaf(rounds):
    for _ in range(rounds):
        read(0)
        read(1)
    return read(0)


def descend(depth, rounds):
    if depth <= 1:
        return leaf(rounds)
    return descend(depth - 1, rounds)


print(descend(int(sys.argv[2]), int(sys.argv[3])))
