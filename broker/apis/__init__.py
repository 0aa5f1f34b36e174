"""One module per Kafka API: API_KEY, VERSIONS and `async handle(ctx, request)`."""
