// Package envdefault reads the HELIOSTAT_* environment variables that
// supply flag defaults (the cluster's name, the brokers, ClickHouse), the
// same way for every flag.
package envdefault

// String returns getenv(key) when getenv is not nil and the variable is set
// and not empty, else def.
func String(getenv func(string) string, key, def string) string {
	if getenv != nil {
		if v := getenv(key); v != "" {
			return v
		}
	}
	return def
}
