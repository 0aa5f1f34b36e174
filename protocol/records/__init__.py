"""The records the coordinators keep in Kafka's internal topics, as types and as Kafka's key and value
bytes: `__consumer_offsets` (classic_records.py, consumer_records.py; codec.py, consumer_codec.py) and
`__transaction_state` (transaction_log.py). Formats only: the coordinators build and replay them, the
broker appends them, the pipeline reads them, and none of those is imported here."""
