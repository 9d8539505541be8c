package gittest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SSHServer serves the bare repositories under Root over ssh on 127.0.0.1, running the git
// binary's upload-pack for each fetch, to the one client key it was made with.
type SSHServer struct {
	Root string
	// ClientKey is the PEM private key the server accepts (OpenSSH format).
	ClientKey []byte

	hostKey ssh.Signer
	client  ssh.PublicKey
	l       net.Listener
	wg      sync.WaitGroup
}

// NewSSHServer makes fresh host and client keys and starts serving.
func NewSSHServer(t testing.TB, root string) *SSHServer {
	t.Helper()
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	clientPub, clientPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s := &SSHServer{Root: root}
	if s.hostKey, err = ssh.NewSignerFromKey(hostPriv); err != nil {
		t.Fatal(err)
	}
	if s.client, err = ssh.NewPublicKey(clientPub); err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(clientPriv, "")
	if err != nil {
		t.Fatal(err)
	}
	s.ClientKey = pem.EncodeToMemory(block)
	if s.l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(s.Stop)
	return s
}

// KnownHosts is the known_hosts line for the server.
func (s *SSHServer) KnownHosts() []byte {
	return []byte(knownhosts.Line([]string{knownhosts.Normalize(s.l.Addr().String())}, s.hostKey.PublicKey()) + "\n")
}

// URL is the ssh address of the repository named name.
func (s *SSHServer) URL(name string) string {
	return fmt.Sprintf("ssh://git@%s/%s", s.l.Addr(), name)
}

// Stop closes the listener and waits for the accept loop.
func (s *SSHServer) Stop() {
	s.l.Close()
	s.wg.Wait()
}

func (s *SSHServer) serve() {
	defer s.wg.Done()
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if string(key.Marshal()) == string(s.client.Marshal()) {
				return nil, nil
			}
			return nil, errors.New("unknown key")
		},
	}
	cfg.AddHostKey(s.hostKey)
	for {
		conn, err := s.l.Accept()
		if err != nil {
			return
		}
		go s.handle(conn, cfg)
	}
}

func (s *SSHServer) handle(conn net.Conn, cfg *ssh.ServerConfig) {
	defer conn.Close()
	_, chans, reqs, err := ssh.NewServerConn(conn, cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "sessions only")
			continue
		}
		ch, requests, err := nc.Accept()
		if err != nil {
			return
		}
		go s.session(ch, requests)
	}
}

// session runs the one command git asks for: git-upload-pack '<path>'.
func (s *SSHServer) session(ch ssh.Channel, requests <-chan *ssh.Request) {
	defer ch.Close()
	for req := range requests {
		if req.Type != "exec" || len(req.Payload) < 4 {
			req.Reply(false, nil)
			continue
		}
		command := string(req.Payload[4:])
		service, arg, _ := strings.Cut(command, " ")
		if service != "git-upload-pack" {
			req.Reply(false, nil)
			return
		}
		req.Reply(true, nil)
		repo := filepath.Join(s.Root, filepath.Clean("/"+strings.Trim(arg, "'")))
		cmd := exec.Command("git", "upload-pack", repo)
		cmd.Stdout, cmd.Stderr = ch, ch.Stderr()
		// A pipe rather than cmd.Stdin = ch: Wait would wait for the client to close its side,
		// and the client waits for the exit status.
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return
		}
		go func() {
			io.Copy(stdin, ch)
			stdin.Close()
		}()
		status := uint32(0)
		if err := cmd.Run(); err != nil {
			status = 1
		}
		payload := make([]byte, 4)
		binary.BigEndian.PutUint32(payload, status)
		ch.SendRequest("exit-status", false, payload)
		return
	}
}
