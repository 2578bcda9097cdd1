#!/usr/bin/env python3
"""genmanifest.py: writes a pacefs manifest of DIRS x PER_DIR files shaped like
ImageNet's training set (train/nNNNNN/img_NNNNNNNN.JPEG), each with one URL
under one prefix and a size, streamed so that 10 M entries need no memory.

Usage: genmanifest.py [--dirs 1000] [--per-dir 1000] [--size BYTES]
                      URL_PREFIX OUT.json

URL_PREFIX is joined to each path ("http://127.0.0.1:8080/" gives
"http://127.0.0.1:8080/train/n00000/img_00000000.JPEG"). Sizes are
BYTES when given, else a spread from 80,000 to 159,999 bytes (an ImageNet
JPEG's range) derived from the file's number, so two runs write the same
bytes. Nothing is fetched: pacefs does not probe a manifest's files when
they have sizes, so the origin need not hold them to time a mount.
"""
import argparse
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dirs", type=int, default=1000)
    ap.add_argument("--per-dir", type=int, default=1000)
    ap.add_argument("--size", type=int, default=None)
    ap.add_argument("prefix")
    ap.add_argument("out")
    a = ap.parse_args()
    if a.dirs < 1 or a.per_dir < 1 or a.dirs * a.per_dir > 2**32 - 2:
        sys.exit("genmanifest.py: --dirs and --per-dir must give 1 to 2^32-2 files")
    prefix = a.prefix if a.prefix.endswith("/") else a.prefix + "/"
    n = 0
    with open(a.out, "w", encoding="ascii", buffering=1 << 20) as f:
        f.write('{"version": 1, "files": [\n')
        for d in range(a.dirs):
            lines = []
            for _ in range(a.per_dir):
                path = "train/n%05d/img_%08d.JPEG" % (d, n)
                size = a.size if a.size is not None else 80000 + (n * 7919) % 80000
                lines.append(
                    '{"path":"%s","urls":["%s%s"],"size":%d}'
                    % (path, prefix, path, size)
                )
                n += 1
            f.write((",\n" if d else "") + ",\n".join(lines))
        f.write("\n]}\n")
    print("%s: %d files in %d directories" % (a.out, n, a.dirs))


if __name__ == "__main__":
    main()
