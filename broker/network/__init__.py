"""The TCP shell: sockets, frames, one sans-IO `Connection` per client, the router table that hands a
decoded request to its handler, and the bytes of each answer (error answers included).

Handlers (broker/apis/) are registered into the router by the wiring (broker/app.py); this package
never imports a handler."""
