package slurmadapter

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
	"github.com/heliostat-dev/heliostat/internal/slurmfmt"
)

// exclusions are the nodes Slurm's own power saving must leave on, as
// slurm.conf (or `scontrol update`, from Slurm 23.02) says: SuspendExcNodes,
// SuspendExcParts and SuspendExcStates. Slurm 22.05 checks them only in its
// own power saving: it accepts a manual `scontrol update nodename=N
// state=POWER_DOWN` of an excluded node and runs the SuspendProgram, so the
// adapter must honour them itself.
type exclusions struct {
	// nodes are SuspendExcNodes' groups.
	nodes []excGroup
	// parts are SuspendExcParts: every node of these partitions.
	parts []string
	// states are SuspendExcStates (Slurm 23.02 on), upper case: every
	// node in one of these states (base state or flag).
	states []string
}

// excGroup is one group of SuspendExcNodes: its nodes, and how many of them
// (keep) must stay usable — on, idle and not down or draining — when the
// group came with a ":count" ("nid[10-20]:4"); keep 0 excludes them all.
type excGroup struct {
	names []string
	keep  int
}

// excKeys are the settings `scontrol show config` prints that the adapter
// reads; SuspendExcStates only from Slurm 23.02 on.
const (
	keyExcNodes  = "SuspendExcNodes"
	keyExcParts  = "SuspendExcParts"
	keyExcStates = "SuspendExcStates"
)

// decodeConfig reads the power-saving exclusions out of `scontrol show
// config`: lines "Key = value", "(null)" for a setting left unset. The
// output must hold SuspendExcNodes and SuspendExcParts (Slurm prints both
// whether set or not), each once: else it is not scontrol's answer, and the
// adapter would not know which nodes to leave on (ErrShape). A value that
// cannot be read is ErrRecord, naming the setting.
func decodeConfig(b []byte) (exclusions, error) {
	var ex exclusions
	vals, err := slurmfmt.ConfigValues(b, keyExcNodes, keyExcParts, keyExcStates)
	if err != nil {
		return exclusions{}, fmt.Errorf("scontrol show config: %w: %v", ErrShape, err)
	}
	for _, k := range []string{keyExcNodes, keyExcParts} {
		if _, ok := vals[k]; !ok {
			return exclusions{}, fmt.Errorf("scontrol show config: %w: no %s line", ErrShape, k)
		}
	}
	for _, key := range []string{keyExcNodes, keyExcParts, keyExcStates} {
		v, ok := vals[key]
		if !ok {
			continue
		}
		var err error
		switch key {
		case keyExcNodes:
			ex.nodes, err = parseExcNodes(v.Value)
		case keyExcParts:
			ex.parts = splitSetting(v.Value)
		case keyExcStates:
			for _, s := range splitSetting(v.Value) {
				ex.states = append(ex.states, strings.ToUpper(s))
			}
		}
		if err != nil {
			return exclusions{}, fmt.Errorf("scontrol show config: %w: %s = %q (line %d): %v", ErrRecord, key, clipString(v.Value, 200), v.Line, err)
		}
	}
	return ex, nil
}

// parseExcNodes reads SuspendExcNodes: a comma-separated list of host
// lists, each with an optional ":count" (slurm.conf(5)): "nid[10-20]:4"
// keeps 4 usable nodes of nid10..nid20 on, "nid[60-70]" every one of them.
//
// A count applies here to the host list right before it. Slurm 22.05 reads
// "nid[1-3],nid[10-20]:4" as 4 of all 14 nodes, later versions as every
// node of nid[1-3] and 4 of nid[10-20]; the later reading keeps all that
// the earlier does on and more, so it is right for both. A count of a
// group's size or more keeps the whole group on. A count that is not a
// whole number of at least 1 is an error, as it is to Slurm.
func parseExcNodes(s string) ([]excGroup, error) {
	var out []excGroup
	items, err := slurmfmt.SplitHostlist(s)
	if err != nil {
		return nil, err
	}
	for _, item := range items {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		hosts, count, counted := strings.Cut(item, ":")
		names, err := slurmfmt.ExpandHostlist(hosts)
		if err != nil {
			return nil, err
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("no nodes before %q", clipString(item, 40))
		}
		g := excGroup{names: names}
		if counted {
			n, err := strconv.Atoi(count)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("node count %q of %s is not a whole number of at least 1", clipString(count, 40), clipString(hosts, 40))
			}
			if n < len(names) {
				g.keep = n
			}
		}
		out = append(out, g)
	}
	return out, nil
}

// splitSetting splits a comma-separated setting, leaving out empty items.
func splitSetting(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// clipString returns s cut to at most n bytes, on a character boundary,
// with "…" where it was cut.
func clipString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// none reports whether ex excludes no node.
func (ex exclusions) none() bool {
	return len(ex.nodes) == 0 && len(ex.parts) == 0 && len(ex.states) == 0
}

// counted reports whether name is in a SuspendExcNodes group with a count:
// whether it may be powered down then depends on the group's other nodes.
func (ex exclusions) counted(name string) bool {
	for _, g := range ex.nodes {
		if g.keep > 0 && slices.Contains(g.names, name) {
			return true
		}
	}
	return false
}

// mark sets PowerSaveExcluded on the nodes ex excludes: every node of a
// group without a count, of an excluded partition or in an excluded state;
// and, of a group with a count N, N of its usable nodes (waking ones first,
// which cannot be powered down anyway, then the others by name), so that
// powering down any node left unmarked leaves N usable. A group with fewer
// than N usable nodes has all of them marked. nodes must hold every node of
// the counted groups for their count to be right; a node of such a group
// that is missing from nodes counts as not usable.
func (ex exclusions) mark(nodes []adapter.Node) {
	if ex.none() {
		return
	}
	byName := make(map[string]int, len(nodes))
	for i, n := range nodes {
		byName[n.Name] = i
	}
	for _, g := range ex.nodes {
		if g.keep == 0 {
			for _, name := range g.names {
				if i, ok := byName[name]; ok {
					nodes[i].PowerSaveExcluded = true
				}
			}
			continue
		}
		var usable []int
		for _, name := range g.names {
			if i, ok := byName[name]; ok && usableForCount(nodes[i]) {
				usable = append(usable, i)
			}
		}
		slices.SortFunc(usable, func(a, b int) int {
			aw, bw := nodes[a].Power == adapter.PowerWaking, nodes[b].Power == adapter.PowerWaking
			if aw != bw {
				if aw {
					return -1
				}
				return 1
			}
			return strings.Compare(nodes[a].Name, nodes[b].Name)
		})
		for _, i := range usable[:min(g.keep, len(usable))] {
			nodes[i].PowerSaveExcluded = true
		}
	}
	if len(ex.parts) == 0 && len(ex.states) == 0 {
		return
	}
	for i := range nodes {
		n := &nodes[i]
		if slices.ContainsFunc(n.Partitions, func(p string) bool { return slices.Contains(ex.parts, p) }) {
			n.PowerSaveExcluded = true
			continue
		}
		for _, w := range strings.Split(n.State, "+") {
			if slices.Contains(ex.states, strings.ToUpper(w)) {
				n.PowerSaveExcluded = true
				break
			}
		}
	}
}

// usableForCount reports whether n counts toward a SuspendExcNodes group's
// count, as Slurm counts it: on (or waking) and idle, not down, draining or
// otherwise unusable. A node holding a job does not count, which keeps more
// of the group on.
func usableForCount(n adapter.Node) bool {
	return n.Power.Powered() && !n.Busy && len(n.Jobs) == 0 && !n.Unusable
}
