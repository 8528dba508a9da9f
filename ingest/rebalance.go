package ingest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
)

// Rebalances. kafka-go ends a generation as soon as the coordinator announces
// a rebalance (a replica joined or left), stops heartbeating, and joins the
// next generation only once every function the generation started has
// returned. A write already on its way to ClickHouse keeps that function
// running. Were the member dropped meanwhile (the coordinator drops a member
// that neither heartbeats nor rejoins within the session timeout), its
// partitions would go to another replica, which reads the ledger and the
// intents before that write lands and then writes the same offsets again.
// So:
//
//   - flush begins no write (dead letters, intents, rows, marks, heads) once
//     its generation has ended; the sink drops the open batch instead of
//     flushing it. Nothing of it is committed, and the next owner of the
//     partitions reads those offsets again.
//   - holdSession heartbeats for the member from the end of the generation
//     until its function returned, so that the coordinator waits for it to
//     rejoin instead of dropping it, for at most the rebalance timeout;
//   - the rebalance timeout exceeds the longest write in flight: insertTimeout
//     bounds an INSERT, the other writes take a minute at most.
//
// The price: a replica stuck in a write holds up every rebalance of the group,
// and so the reading of every replica, for up to rebalanceTimeout. What is
// left: a replica cut off from the coordinator but not from ClickHouse
// cannot heartbeat; it is dropped after the session timeout while its write
// (at most insertTimeout) may still land, and settleIntents on the new owner
// only waits for INSERTs that ClickHouse already lists as running.

// insertTimeout bounds the sending of one INSERT. Its outcome is unknown when
// it is cut short, so it is not cut short when the generation ends (see
// insert); rebalanceTimeout waits longer than this.
const insertTimeout = 2 * time.Minute

// shutdownFlushTimeout bounds how long Run, once its context is done, goes on
// flushing before it leaves the group. What it did not write is read again
// by the next owner of the partitions.
const shutdownFlushTimeout = 15 * time.Second

// rebalanceTimeout is the consumer group's rebalance timeout for a session
// timeout: how long the coordinator waits for the members to rejoin. It
// covers a write in flight (insertTimeout) and the rejoin itself.
func rebalanceTimeout(session time.Duration) time.Duration {
	return insertTimeout + max(30*time.Second, 3*session)
}

// holdSession keeps gen's member in the group from the end of gen (ctx done)
// until release is called, by sending the heartbeats kafka-go stops sending
// once a generation ended: the coordinator then waits for the member's
// rejoin (up to rebalanceTimeout) before it hands its partitions to another
// replica. Call release when the generation's function returns, just
// before kafka-go rejoins.
func (in *Ingester) holdSession(ctx context.Context, gen *kafka.Generation) (release func()) {
	hold, stop := context.WithCancel(context.WithoutCancel(ctx))
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case <-hold.Done():
			return
		case <-ctx.Done():
		}
		tick := time.NewTicker(in.cfg.SessionTimeout / 5)
		defer tick.Stop()
		var coord net.Addr
		for {
			var err error
			if coord == nil {
				coord, err = in.coordinator(hold, gen.GroupID)
			}
			if err == nil {
				var lost bool
				if lost, err = in.heartbeat(hold, coord, gen); lost {
					// The rebalance went on without this member:
					// what it still writes may meet another
					// replica's rows (see the top of this file).
					in.m.errors.WithLabelValues("group").Inc()
					in.logger.Warn("consumer group dropped this replica while it was still writing; its partitions may be read by another replica before the write ends",
						"group", gen.GroupID, "generation", gen.ID, "err", err)
					return
				}
			}
			if err != nil {
				coord = nil
				if hold.Err() == nil {
					in.warnf("group", "heartbeat while finishing a generation failed, retrying", "group", gen.GroupID, "err", err)
				}
			}
			select {
			case <-hold.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() {
		stop()
		<-finished
	}
}

// coordinator returns the address of group's coordinator. kafka-go's client
// sends a heartbeat to any broker, not to the coordinator.
func (in *Ingester) coordinator(ctx context.Context, group string) (net.Addr, error) {
	rctx, cancel := context.WithTimeout(ctx, in.cfg.SessionTimeout)
	defer cancel()
	res, err := in.kafkaClient().FindCoordinator(rctx, &kafka.FindCoordinatorRequest{Key: group, KeyType: kafka.CoordinatorKeyTypeConsumer})
	if err == nil && res.Error != nil {
		err = res.Error
	}
	if err != nil {
		return nil, fmt.Errorf("find the coordinator of group %s: %w", group, err)
	}
	return kafka.TCP(net.JoinHostPort(res.Coordinator.Host, strconv.Itoa(res.Coordinator.Port))), nil
}

// heartbeat sends one heartbeat for gen's member to coord. lost reports that
// the coordinator no longer counts the member in gen (the rebalance completed
// without it).
func (in *Ingester) heartbeat(ctx context.Context, coord net.Addr, gen *kafka.Generation) (lost bool, err error) {
	rctx, cancel := context.WithTimeout(ctx, in.cfg.SessionTimeout)
	defer cancel()
	res, err := in.kafkaClient().Heartbeat(rctx, &kafka.HeartbeatRequest{Addr: coord, GroupID: gen.GroupID, GenerationID: gen.ID, MemberID: gen.MemberID})
	if err != nil {
		return false, fmt.Errorf("heartbeat: %w", err)
	}
	switch {
	case res.Error == nil, errors.Is(res.Error, kafka.RebalanceInProgress):
		// The coordinator counts the member as alive and waits for its
		// rejoin.
		return false, nil
	case errors.Is(res.Error, kafka.UnknownMemberId), errors.Is(res.Error, kafka.IllegalGeneration), errors.Is(res.Error, kafka.FencedInstanceID):
		return true, res.Error
	}
	return false, fmt.Errorf("heartbeat: %w", res.Error)
}
