package testcluster

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"slices"
	"testing"

	"k8s.io/client-go/util/keyutil"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s: no PEM block", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	return cert
}

func TestGeneratePKIChainsToCA(t *testing.T) {
	p, err := generatePKI(t.TempDir())
	if err != nil {
		t.Fatalf("generatePKI: %v", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(readCert(t, p.caCert))

	serving := readCert(t, p.servingCert)
	if serving.Subject.CommonName != "kube-apiserver" {
		t.Errorf("serving certificate subject %v, want CN=kube-apiserver", serving.Subject)
	}
	for _, name := range []string{"127.0.0.1", "localhost", "kubernetes.default.svc", serviceClusterIP} {
		if _, err := serving.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("serving certificate does not verify for %s: %v", name, err)
		}
	}

	clients := []struct {
		path, cn, org string
	}{
		{p.adminCert, "admin", "system:masters"},
		{p.kcmCert, "system:kube-controller-manager", ""},
		{p.schedulerCert, "system:kube-scheduler", ""},
	}
	for _, c := range clients {
		cert := readCert(t, c.path)
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("%s: not a client certificate of the CA: %v", c.cn, err)
		}
		if cert.Subject.CommonName != c.cn || (c.org != "" && !slices.Contains(cert.Subject.Organization, c.org)) {
			t.Errorf("%s: subject %v, want CN=%s O=%s", c.path, cert.Subject, c.cn, c.org)
		}
	}

	frontProxyRoots := x509.NewCertPool()
	frontProxyRoots.AddCert(readCert(t, p.frontProxyCACert))
	proxyClient := readCert(t, p.proxyClientCert)
	if _, err := proxyClient.Verify(x509.VerifyOptions{Roots: frontProxyRoots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("front-proxy client certificate does not chain to the front-proxy CA: %v", err)
	}
	if _, err := proxyClient.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Errorf("front-proxy client certificate verifies against the cluster CA; the two CAs must be distinct")
	}

	if info, err := os.Stat(p.saKey); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("service-account key: %v, mode %v; want a 0600 file", err, info.Mode().Perm())
	}
	key, err := keyutil.PrivateKeyFromFile(p.saKey)
	if err != nil {
		t.Fatalf("service-account key: %v", err)
	}
	pubs, err := keyutil.PublicKeysFromFile(p.saPub)
	if err != nil || len(pubs) != 1 {
		t.Fatalf("service-account public key: %v (%d keys)", err, len(pubs))
	}
	if rsaKey, ok := key.(*rsa.PrivateKey); !ok || !rsaKey.PublicKey.Equal(pubs[0]) {
		t.Errorf("service-account key pair: %T private key whose public half is not sa.pub", key)
	}
}
