module github.com/strom-dev/strom

go 1.26.0

require (
	github.com/destel/rill v0.7.0
	github.com/reugn/go-streams v0.13.0
	github.com/stretchr/testify v1.12.1
	github.com/twmb/franz-go v1.22.3
	golang.org/x/sys v0.50.0
)

require (
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/twmb/franz-go/pkg/kmsg v1.15.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
