"""`python -m fedbench` entry point."""

from fedbench.cli import main

if __name__ == "__main__":
    main()
