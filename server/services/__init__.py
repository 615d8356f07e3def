"""What the requests use besides the rooms: leaderboards and profiles (`server.services.rankings`),
the solver behind hints and winnable deals (`server.services.hints`, `server.services.winnable`),
the quotas on unfinished games (`server.services.quotas`), and the sealing of shared deals
(`server.services.sealing`, pure; `server.services.fair_play`, its lookups)."""
