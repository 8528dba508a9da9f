package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	tests := []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"module version", debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		{"devel, no VCS", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
		{"VCS revision", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "false"}}}, "0123456789ab"},
		{"VCS revision, modified", debug.BuildInfo{Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}, "0123456789ab-dirty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fromBuildInfo(&tt.bi); got != tt.want {
				t.Errorf("version = %q; want %q", got, tt.want)
			}
		})
	}
}

func TestLinkTimeVersionWins(t *testing.T) {
	saved := version
	defer func() { version = saved }()
	version = "v9.9.9-1-gabc"
	if got := Version(); got != version {
		t.Errorf("Version() = %q; want the link-time %q", got, version)
	}
}
