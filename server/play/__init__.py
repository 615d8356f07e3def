"""The play core: what a game room does with each command, and the one driver that runs its effects.

- `server.play.commands`: what goes into a room (a request of a connection, another node's commit,
  the outcome of an effect);
- `server.play.effects`: what comes out (commit this write, reply to this request, push this message
  to these followers, publish on the bus, load the stored game, rebuild off the loop, leave the node);
- `server.play.game_room`: `GameRoom`, one game as a state machine without I/O: commands in, effects out;
- `server.play.driver`: `RoomDriver`, the one place a room's effects are run and their outcomes fed back;
- `server.play.replay`: a stored game rebuilt through the engine.

A new kind of room (a race) is a second state machine with the same commands and effects where they
fit, run by the same driver.
"""
