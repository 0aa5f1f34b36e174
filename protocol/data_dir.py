"""Names in a broker's data directory that readers other than the broker rely on.

The broker writes the directory and the analytics pipeline reads it offline; both take the layout
from here, so neither has to import the other.
"""

TOPICS_DIR = "topics"  # one JSON file per topic: its id, partition count and configs
