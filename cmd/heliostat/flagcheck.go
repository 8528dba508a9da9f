package main

import (
	"flag"
	"fmt"
	"slices"
	"time"
)

// refuseZero fails when one of the named flags was given as 0. Their
// configs read 0 as "the default", so `--sim.nodes 0` would otherwise run
// quietly on the default cluster size.
func refuseZero(fs *flag.FlagSet, names ...string) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err != nil || !slices.Contains(names, f.Name) {
			return
		}
		g, ok := f.Value.(flag.Getter)
		if !ok {
			return
		}
		zero := false
		switch v := g.Get().(type) {
		case int:
			zero = v == 0
		case float64:
			zero = v == 0
		case time.Duration:
			zero = v == 0
		}
		if zero {
			err = fmt.Errorf("--%s %s: must be above 0 (leave the flag out for the default, %s)", f.Name, f.Value, f.DefValue)
		}
	})
	return err
}

// setDefault makes value the default of the registered flag name, in
// effect and in -h.
func setDefault(fs *flag.FlagSet, name, value string) error {
	f := fs.Lookup(name)
	if f == nil {
		return fmt.Errorf("no flag --%s to set a default for", name)
	}
	if err := f.Value.Set(value); err != nil {
		return fmt.Errorf("default of --%s: %w", name, err)
	}
	f.DefValue = f.Value.String()
	if f.DefValue == "" { // a flag.Func: it cannot say its value
		f.DefValue = value
	}
	return nil
}
