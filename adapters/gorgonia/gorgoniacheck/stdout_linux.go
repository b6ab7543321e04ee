//go:build linux

package gorgoniacheck

import (
	"os"
	"syscall"
)

// protocolStdout moves the process's stdout aside for the protocol and points file descriptor 1
// at stderr (Dup3: linux/arm64 has no Dup2).
func protocolStdout() (*os.File, error) {
	fd, err := syscall.Dup(1)
	if err != nil {
		return nil, err
	}
	if err := syscall.Dup3(2, 1, 0); err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "gradcheck-protocol"), nil
}
