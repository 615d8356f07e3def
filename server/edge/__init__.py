"""The network edge: bytes in, whole messages to the application, replies and pushes out.

- `server.edge.transport`: WebSocket and HTTP on one port (websockets' sans-I/O protocol per socket),
  framing, metering every frame (the token buckets of `server.ratelimit`), keepalive, closes; the
  only module that imports websockets;
- `server.edge.admission`: who may connect (caps per address and in all; the allowed origins and the
  trusted proxies are `server.origins`);
- `server.edge.connections`: an open connection's session, its messages decoded and handed to the
  dispatcher one at a time, its replies written (`Fanout` frames a message once for many);
- `server.edge.http`: the plain HTTP endpoints (health, metrics, the JSON API, the browser client).
"""
