"""The transaction coordinator (KIP-98): pure state machine, TransactionLog formats."""
