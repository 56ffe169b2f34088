"""``python -m bench``: every benchmark, see :mod:`bench.run`."""

from bench.run import main

if __name__ == "__main__":
    main()
