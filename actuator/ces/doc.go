// Package ces plans Cluster Energy Saving: from the nodes' state, the current
// node demand and a demand forecast with its uncertainty, which nodes to power
// down and which to power up.
//
// (Config).Plan is a pure function: the same Input always gives the same Plan,
// and it reads no clock. What it must remember between calls (how long the
// target has stayed below the powered count, the transitions of the last
// hour) travels in State, returned as Plan.Next and handed back with the next
// Input; a caller whose actions were not all carried out (a dry run, an
// action held back) hands back Plan.Carried instead, so that only the
// transitions attempted count. The scheduler adapters, the advisory API and the replay (Replay, the
// `heliostat sim ces` command) all run this same function.
//
// The rules, each tested:
//   - a node that is busy (runs a job or has one allocated) or incoming (about
//     to receive one) is never powered down;
//   - the powered count never drops below Config.MinPowered;
//   - a shortfall (target above the nodes powered or waking) powers nodes up
//     at once, limited only by the nodes that are off: neither hysteresis nor
//     the transition cap delays it;
//   - power-downs wait until the target has stayed below the powered count for
//     Config.DownDelay, go no lower than the highest target seen meanwhile,
//     and only when that frees more than Config.DownMargin nodes (asymmetric
//     hysteresis: up at once, down slowly);
//   - power-downs stop when the transitions of the last hour (up and down)
//     reach Config.MaxTransitionsPerHour.
//
// Which nodes: held nodes (busy, incoming, needed) that are off first, then
// nodes a pending job asks for (Node.Wanted) are woken first and powered
// down last, then the idle nodes kept powered are spread over the node
// kinds (Node.Kind) in proportion to their nodes, then the node off (or on)
// longest, then the name.
package ces
