package release

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"time"
)

// File is one file of an archive.
type File struct {
	// Name is the file's path in the archive, with forward slashes.
	Name string
	// Mode is its permission bits (0o755 for a program, 0o644 otherwise).
	Mode fs.FileMode
	// Data is its content.
	Data []byte
}

// TarGz returns files as a gzip-compressed tar archive, in the given order, each owned by root
// (0:0, no user or group names) with mtime as its time; the gzip header has no time and no name, so
// equal files give equal bytes.
func TarGz(files []File, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(gz)
	mtime = mtime.UTC().Truncate(time.Second)
	for _, f := range files {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f.Name, Mode: int64(f.Mode.Perm()), Size: int64(len(f.Data)),
			ModTime: mtime, Format: tar.FormatUSTAR}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("archiving %s: %w", f.Name, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, fmt.Errorf("archiving %s: %w", f.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Zip returns files as a zip archive (deflated), in the given order, with mtime as every file's
// time and their modes, so equal files give equal bytes.
func Zip(files []File, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	mtime = mtime.UTC().Truncate(time.Second)
	for _, f := range files {
		hdr := &zip.FileHeader{Name: f.Name, Method: zip.Deflate, Modified: mtime}
		hdr.SetMode(f.Mode.Perm())
		w, err := zw.CreateHeader(hdr)
		if err != nil {
			return nil, fmt.Errorf("archiving %s: %w", f.Name, err)
		}
		if _, err := w.Write(f.Data); err != nil {
			return nil, fmt.Errorf("archiving %s: %w", f.Name, err)
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
