"""Races: several players on one deal, revealed to all at once, each seat an ordinary game.

The race is the second state machine on the play core's one driver (`server.play.driver`), beside
the game room (`server.play.game_room`): the driver runs a `RaceRoom`'s effects as it runs a
`GameRoom`'s, and a seat's game room tells its race of each commit (`Observe`).

Pure (values and rules, no I/O and no clock):
- `server.play.race.value`: `Race` and `Seat`, frozen, with `Phase` and `SeatStatus`; every rule a
  transition that returns the next `Race` or raises a refusal; places and diffs of values;
- `server.play.race.places`: the order of places, the one statement of who beat whom;
- `server.play.race.boards`: the boards held back for spectators until they are old enough;
- `server.play.race.matchmaking`: quick match's pool, who races whom;
- `server.play.race.commands`: what goes into a race room.

The room, still without I/O:
- `server.play.race.room`: `RaceRoom`, which proposes the value a request or a timer makes, commits
  it and adopts it once stored, and orders what each change sends.

The shell (I/O):
- `server.play.race.registry`: the node's copies of races, their storage and the sweep;
- `server.play.race.quick_match`: quick match's timer and the connections waiting in it.
"""
