// Placeholders for dump and verify until log.ScanSegment and log.Verify land
// on issue8-inspect; removed by the commit that adds the commands.

package main

import "github.com/spf13/cobra"

func newDumpCmd(a *app) *cobra.Command   { return &cobra.Command{Use: "dump", Hidden: true} }
func newVerifyCmd(a *app) *cobra.Command { return &cobra.Command{Use: "verify", Hidden: true} }
