package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/karpool/karpool/internal/migrate"
)

// maxMigrateFileSize caps what migrate reads from one file (or stdin).
const maxMigrateFileSize = 10 << 20

func newMigrateCommand() *cobra.Command {
	var write bool
	cmd := &cobra.Command{
		Use:   "migrate [FILE...]",
		Short: "Convert v1alpha5 and v1beta1 Karpenter manifests to karpenter.sh/v1 and karpenter.k8s.aws/v1",
		Long: `migrate converts Provisioner (with AWSNodeTemplate or an inline provider), v1beta1 NodePool
and v1beta1 EC2NodeClass documents to v1 NodePool and EC2NodeClass. Other documents pass
through unchanged (byte for byte), so whole files can be migrated; in converted documents
key order and comments are kept.

Files given together are migrated together: a pool's kubelet settings move into the
EC2NodeClass it references, wherever that is defined. Without FILE (or with -), stdin is read.

The result goes to stdout, or with -w back into the files. Every lossy or ambiguous conversion,
and every default the old API applied implicitly that is now written out, is reported on
stderr as "file:line: warning: ...". Input that cannot be converted is reported as
"file:line: error: ..."; then nothing is written and the exit code is 1 (2 for usage or I/O
errors).`,
		Example: `  karpool migrate provisioner.yaml > nodepool.yaml
  karpool migrate -w pools/*.yaml classes/*.yaml
  helm template ./chart | karpool migrate -`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMigrate(cmd, args, write)
		},
	}
	cmd.Flags().BoolVarP(&write, "write", "w", false, "rewrite the files in place instead of printing the result")
	return cmd
}

func runMigrate(cmd *cobra.Command, args []string, write bool) error {
	if len(args) == 0 {
		args = []string{"-"}
	}
	stdin := 0
	for _, a := range args {
		if a == "-" {
			stdin++
		}
	}
	if stdin > 1 {
		return usageError{errors.New("stdin (-) given more than once")}
	}
	if write && stdin > 0 {
		return usageError{errors.New("-w rewrites files in place; it cannot be used with stdin")}
	}
	var inputs []migrate.Input
	for _, a := range args {
		data, name, err := readMigrateInput(cmd, a)
		if err != nil {
			return usageError{err}
		}
		inputs = append(inputs, migrate.Input{Name: name, Data: data})
	}
	res := migrate.Files(inputs)
	stderr := cmd.ErrOrStderr()
	for _, d := range res.Diagnostics {
		fmt.Fprintln(stderr, d.String())
	}
	if n := res.Errors(); n > 0 {
		return fmt.Errorf("%d document(s) could not be converted; nothing was written", n)
	}
	if !write {
		out := cmd.OutOrStdout()
		for i, o := range res.Outputs {
			if i > 0 {
				if len(res.Outputs[i-1].Data) > 0 && res.Outputs[i-1].Data[len(res.Outputs[i-1].Data)-1] != '\n' {
					fmt.Fprintln(out)
				}
				fmt.Fprintln(out, "---")
			}
			if _, err := out.Write(o.Data); err != nil {
				return usageError{fmt.Errorf("writing output: %w", err)}
			}
		}
		return nil
	}
	for _, o := range res.Outputs {
		if !o.Changed {
			continue
		}
		if err := writeFileAtomic(o.Name, o.Data); err != nil {
			return usageError{err}
		}
		fmt.Fprintf(stderr, "%s: migrated\n", o.Name)
	}
	return nil
}

func readMigrateInput(cmd *cobra.Command, arg string) ([]byte, string, error) {
	var r io.Reader
	name := arg
	if arg == "-" {
		r, name = cmd.InOrStdin(), "<stdin>"
	} else {
		fi, err := os.Stat(arg)
		if err != nil {
			return nil, "", err
		}
		if fi.IsDir() {
			return nil, "", fmt.Errorf("%s is a directory; migrate takes files (for example: karpool migrate -w %s/*.yaml)", arg, filepath.Clean(arg))
		}
		f, err := os.Open(arg)
		if err != nil {
			return nil, "", err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxMigrateFileSize+1))
	if err != nil {
		return nil, "", fmt.Errorf("reading %s: %w", name, err)
	}
	if len(data) > maxMigrateFileSize {
		return nil, "", fmt.Errorf("%s is larger than %d MiB", name, maxMigrateFileSize>>20)
	}
	return data, name, nil
}

// writeFileAtomic replaces path with data through a temporary file in the same directory, keeping
// the file's permissions.
func writeFileAtomic(path string, data []byte) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".migrate-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(fi.Mode().Perm()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
