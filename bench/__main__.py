"""`make bench`: run every benchmark in turn."""

from bench import codec

if __name__ == "__main__":
    codec.main([])
