"""The console's pages, a module per area: sign-in, numbers (with their blocklist and
forwarding), history, calls and the account. Each reads through a selector and writes through
a service, checking input with the API's own input serializer first, exactly as the API's view
does; an ApplicationError is shown on the form, with the API's status (and Retry-After)."""
