"""``python -m kernellsp``: the same entry point as the ``kernellsp`` console script."""

from kernellsp.cli import main

if __name__ == "__main__":
    main()
