"""Application services: the business logic that the HTTP API and the UI call."""
