package testcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certValidity is long enough for any test run or local session.
const certValidity = 7 * 24 * time.Hour

// frontProxyClientName is the identity kube-apiserver presents to aggregated API
// servers; the request-header allowed names list it.
const frontProxyClientName = "front-proxy-client"

// pki holds the paths of every key and certificate the cluster's components use.
type pki struct {
	caCert, caKey               string
	servingCert, servingKey     string // kube-apiserver's serving certificate
	adminCert, adminKey         string // system:masters client
	kcmCert, kcmKey             string // system:kube-controller-manager client
	schedulerCert, schedulerKey string // system:kube-scheduler client
	saKey, saPub                string // service-account token signing key pair
	// The front-proxy (request-header) CA and the API server's aggregator client
	// certificate, as kubeadm and OpenShift set them up: kube-apiserver then
	// publishes requestheader-client-ca-file in extension-apiserver-authentication,
	// which delegated authentication (library-go's controllercmd) insists on.
	frontProxyCACert, frontProxyCAKey string
	proxyClientCert, proxyClientKey   string

	caPEM []byte
}

// certAuthority signs the cluster's leaf certificates.
type certAuthority struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// generatePKI writes a fresh CA, the API server's serving certificate, client
// certificates for each component and the service-account key pair into dir.
// ECDSA P-256 keeps generation fast; the service-account key is RSA because every
// consumer of service-account tokens accepts RS256.
func generatePKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create pki dir: %w", err)
	}
	p := &pki{
		caCert: filepath.Join(dir, "ca.crt"), caKey: filepath.Join(dir, "ca.key"),
		servingCert: filepath.Join(dir, "apiserver.crt"), servingKey: filepath.Join(dir, "apiserver.key"),
		adminCert: filepath.Join(dir, "admin.crt"), adminKey: filepath.Join(dir, "admin.key"),
		kcmCert: filepath.Join(dir, "kube-controller-manager.crt"), kcmKey: filepath.Join(dir, "kube-controller-manager.key"),
		schedulerCert: filepath.Join(dir, "kube-scheduler.crt"), schedulerKey: filepath.Join(dir, "kube-scheduler.key"),
		saKey: filepath.Join(dir, "sa.key"), saPub: filepath.Join(dir, "sa.pub"),
		frontProxyCACert: filepath.Join(dir, "front-proxy-ca.crt"), frontProxyCAKey: filepath.Join(dir, "front-proxy-ca.key"),
		proxyClientCert: filepath.Join(dir, "front-proxy-client.crt"), proxyClientKey: filepath.Join(dir, "front-proxy-client.key"),
	}

	ca, caPEM, err := newCA("testcluster-ca", p.caCert, p.caKey)
	if err != nil {
		return nil, err
	}
	p.caPEM = caPEM
	frontProxyCA, _, err := newCA("testcluster-front-proxy-ca", p.frontProxyCACert, p.frontProxyCAKey)
	if err != nil {
		return nil, err
	}
	proxyClient := &x509.Certificate{
		Subject:     pkix.Name{CommonName: frontProxyClientName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if err := frontProxyCA.issue(proxyClient, p.proxyClientCert, p.proxyClientKey); err != nil {
		return nil, fmt.Errorf("issue front-proxy client certificate: %w", err)
	}

	serving := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{
			"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local",
		},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(serviceClusterIP)},
	}
	if err := ca.issue(serving, p.servingCert, p.servingKey); err != nil {
		return nil, fmt.Errorf("issue serving certificate: %w", err)
	}

	clients := []struct {
		cn, org   string
		cert, key string
	}{
		{"admin", "system:masters", p.adminCert, p.adminKey},
		{"system:kube-controller-manager", "", p.kcmCert, p.kcmKey},
		{"system:kube-scheduler", "", p.schedulerCert, p.schedulerKey},
	}
	for _, c := range clients {
		tmpl := &x509.Certificate{
			Subject:     pkix.Name{CommonName: c.cn},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		if c.org != "" {
			tmpl.Subject.Organization = []string{c.org}
		}
		if err := ca.issue(tmpl, c.cert, c.key); err != nil {
			return nil, fmt.Errorf("issue client certificate %s: %w", c.cn, err)
		}
	}

	if err := writeServiceAccountKeys(p.saKey, p.saPub); err != nil {
		return nil, err
	}
	return p, nil
}

func newCA(commonName, certPath, keyPath string) (*certAuthority, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour), // tolerate small clock skew
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("self-sign CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parse CA: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := writePEMFiles(certPath, certPEM, keyPath, key); err != nil {
		return nil, nil, err
	}
	return &certAuthority{cert: cert, key: key}, certPEM, nil
}

// issue fills in the validity, serial and key usage of tmpl, signs it with the CA
// and writes certificate and key.
func (ca *certAuthority) issue(tmpl *x509.Certificate, certPath, keyPath string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.Add(certValidity)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return fmt.Errorf("sign certificate: %w", err)
	}
	return writePEMFiles(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPath, key)
}

func writeServiceAccountKeys(keyPath, pubPath string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generate service-account key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("marshal service-account public key: %w", err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	return writePEMFiles(pubPath, pubPEM, keyPath, key)
}

// writePEMFiles writes a PEM certificate or public key and the PKCS#8 private key.
func writePEMFiles(publicPath string, publicPEM []byte, keyPath string, key crypto.Signer) error {
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("marshal private key: %w", err)
	}
	if err := os.WriteFile(publicPath, publicPEM, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(publicPath), err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(keyPath), err)
	}
	return nil
}

func randomSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	return serial, nil
}
