"""Security (issue 14): TLS, SASL mechanisms, SCRAM and PLAIN credentials, ACLs and their checks."""
