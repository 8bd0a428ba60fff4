// Package log is strom's embedded segmented log.
package log
