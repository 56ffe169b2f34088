"""Run the toolkit from a checkout without installing it: ``python cli.py data download``."""

from nmt.cli import main

if __name__ == "__main__":
    main()
