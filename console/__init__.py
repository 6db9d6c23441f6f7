"""The console: server-rendered pages for people, over the same services and selectors as the
API (docs/console.md). It holds no rule of its own: input is checked by the apps' input
serializers and written by their services; what it adds is the browser's side of it (the
sign-in bound to a LoginSession, forms, pages)."""
