package source

import "io/fs"

// IdentityOf returns the device and inode of info as a FileIdentity, for
// tests.
func IdentityOf(info fs.FileInfo) FileIdentity { return identityOf(info, nil) }
