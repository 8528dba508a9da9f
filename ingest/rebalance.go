package ingest

import "time"

// Rebalances. kafka-go ends a generation as soon as the coordinator announces
// a rebalance (a replica joined or left), stops heartbeating, and joins the
// next generation only once every function the generation started has
// returned. The coordinator waits for the members to rejoin for the
// rebalance timeout, which is the session timeout (Config.SessionTimeout),
// and then completes the rebalance without the late ones: their partitions
// go to another replica, which reads the ledger and the intents and then
// the messages after them. A write of the old owner that lands after that
// read stores its rows a second time. So:
//
//   - flush begins no write (dead letters, intents, each block, the GPU
//     inventory, marks, heads, the producers' prune, the commit) once its
//     generation has ended; the sink drops the open batch instead of
//     flushing it. Nothing of it is committed, and the next owner of the
//     partitions reads those offsets again.
//   - a block's INSERT already sent when the generation ends goes on (cut
//     short, its outcome would be unknown). ClickHouse lists it as running
//     under the block's query id (insertQueryID), and the next owner's
//     settleIntents waits for it (awaitInserts) before it reads the ledger:
//     the block's intent was written before the INSERT.
//   - Run's context ending (SIGTERM) is not the generation ending: the
//     generation lasts, and the member heartbeats, while the open batch is
//     flushed and committed, for at most shutdownFlushTimeout; only then does
//     Run close the group, which leaves it.
//
// The rebalance timeout stays the session timeout. A longer one would let
// a replica finish its write before its partitions move, but it also holds
// every rebalance for as long, and kfake (the embedded broker of heliostat
// up and the tests) keeps a member SIGKILLed during a rebalance for up to
// two rebalance timeouts, stalling the group that long after a crash.
//
// What is left: a write whose generation check passed but which ClickHouse
// does not list yet when the next owner settles its intents, because the
// client is still on its way to send it (a connection pool waiting, a slow
// network, the intents' INSERT itself), or because it runs on another server
// behind the same address (awaitInserts sees only its own server's queries).
// An intents write that lands that way is harmless: the old owner then finds
// its generation over and inserts nothing, and a later owner settling that
// intent finds the block's first message either in the ledger or nowhere in
// the table. A block's INSERT that lands that way stores its rows twice.

// shutdownFlushTimeout bounds how long Run, once its context is done, goes on
// beginning writes before it leaves the group. What it did not write is read
// again by the next owner of the partitions.
const shutdownFlushTimeout = 15 * time.Second
