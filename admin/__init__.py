"""`kbroker topic|group|probe --ready|test ...`: an admin client over the Kafka protocol (any broker)
and kbroker's HTTP endpoint. Imports protocol/ only, never the broker."""
