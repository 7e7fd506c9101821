// Reads stack files with the Pulumi CLI's own code and prints, for each, what the CLI hands the
// program: one JSON object per line, {"values": {key: text}, "secretKeys": [...]} or {"error": "..."}.
// The lane compares tools/stackfile.py with it (`python -m tools.stackfile_check`).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/config"
	"github.com/pulumi/pulumi/sdk/v3/go/common/tokens"
	"github.com/pulumi/pulumi/sdk/v3/go/common/workspace"
)

type reading struct {
	Values     map[string]string `json:"values,omitempty"`
	SecretKeys []string          `json:"secretKeys,omitempty"`
	Error      string            `json:"error,omitempty"`
}

func read(project *workspace.Project, path string) reading {
	stack, err := workspace.LoadProjectStack(nil, project, path)
	if err != nil {
		return reading{Error: err.Error()}
	}
	// The blinding decrypter stands "[secret]" in for every secure value, as the render does.
	values, err := stack.Config.Decrypt(config.NewBlindingDecrypter())
	if err != nil {
		return reading{Error: err.Error()}
	}
	out := reading{Values: map[string]string{}, SecretKeys: []string{}}
	for key, value := range values {
		out.Values[key.String()] = value
	}
	for _, key := range stack.Config.SecureKeys() {
		out.SecretKeys = append(out.SecretKeys, key.String())
	}
	sort.Strings(out.SecretKeys)
	return out
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: pulumi-config PROJECT STACK_FILE...")
		os.Exit(2)
	}
	project := &workspace.Project{Name: tokens.PackageName(os.Args[1])}
	encoder := json.NewEncoder(os.Stdout)
	for _, path := range os.Args[2:] {
		if err := encoder.Encode(read(project, path)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
