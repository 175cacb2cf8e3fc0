package main

import (
	"cmp"
	"fmt"
	"runtime/debug"
	"strings"
)

// version describes the build from what the go command recorded in the binary, so that an
// operator can tell which commit a running service was built from without a release process.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "api: no build information (built without module support)"
	}
	return describeBuild(bi)
}

// describeBuild is version over given build information, for tests.
func describeBuild(bi *debug.BuildInfo) string {
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	var b strings.Builder
	fmt.Fprintf(&b, "api %s (module %s)\n", cmp.Or(bi.Main.Version, "(devel)"), cmp.Or(bi.Main.Path, "unknown"))
	rev, built := settings["vcs.revision"], settings["vcs.time"]
	switch {
	case rev == "":
		// go run, go test and -buildvcs=false record no revision.
		b.WriteString("revision: unknown (built without version control information)\n")
	case settings["vcs.modified"] == "true":
		fmt.Fprintf(&b, "revision: %s, with uncommitted changes\n", rev)
	default:
		fmt.Fprintf(&b, "revision: %s\n", rev)
	}
	if built != "" {
		// Go records the commit's time, not the build's: a build is reproducible.
		fmt.Fprintf(&b, "commit time: %s\n", built)
	}
	fmt.Fprintf(&b, "go: %s", bi.GoVersion)
	return b.String()
}
