"""Events: a fixed start and end, every entrant playing the same secret sequence of deals in order,
one ordinary game at a time, on one standings table (docs/events.md).

Pure (values and rules, no I/O and no clock):
- `server.play.event.scoring`: a game's outcome and an entrant's figures, the one statement of
  what a game earns;
- `server.play.event.value`: `Event` (its life as transitions) and `Standings` (a versioned value:
  places, pages, around-me, the diff between two versions).
"""
