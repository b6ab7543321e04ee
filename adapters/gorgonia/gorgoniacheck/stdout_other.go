//go:build !unix

package gorgoniacheck

import "os"

// protocolStdout: without Unix descriptors the protocol keeps stdout; the user's prints must go
// to stderr (or use Check / Serve starting the harness, which need no redirection).
func protocolStdout() (*os.File, error) { return os.Stdout, nil }
