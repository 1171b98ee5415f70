package testcluster

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/openshift/library-go/pkg/crypto"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/util/keyutil"
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

// leafKeys generates the CAs' and leaf certificates' keys: ECDSA P-256 keeps
// generation fast on a small machine (RSA 2048 takes tens of milliseconds each).
var leafKeys = crypto.ECDSAKeyPairGenerator{Curve: crypto.P256}

// generatePKI writes a fresh CA, the API server's serving certificate, client
// certificates for each component and the service-account key pair into dir,
// with library-go's certificate helpers. The service-account key is RSA because
// every consumer of service-account tokens accepts RS256.
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

	ca, err := newCA("testcluster-ca", p.caCert, p.caKey)
	if err != nil {
		return nil, err
	}
	if p.caPEM, err = crypto.EncodeCertificates(ca.Config.Certs...); err != nil {
		return nil, fmt.Errorf("encode CA certificate: %w", err)
	}
	frontProxyCA, err := newCA("testcluster-front-proxy-ca", p.frontProxyCACert, p.frontProxyCAKey)
	if err != nil {
		return nil, err
	}
	if err := issueClient(frontProxyCA, &user.DefaultInfo{Name: frontProxyClientName}, p.proxyClientCert, p.proxyClientKey); err != nil {
		return nil, err
	}

	// What clients dial: loopback, the in-cluster names and the Service IP.
	// library-go would name the certificate after the first host; the
	// extension gives it the component's name instead.
	hosts := sets.New("127.0.0.1", "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local", serviceClusterIP)
	serving, err := ca.NewServerCertificate(hosts, leafKeys, crypto.WithLifetime(certValidity),
		crypto.WithExtensions(func(c *x509.Certificate) error {
			c.Subject = pkix.Name{CommonName: "kube-apiserver"}
			return nil
		}))
	if err != nil {
		return nil, fmt.Errorf("issue serving certificate: %w", err)
	}
	if err := serving.WriteCertConfigFile(p.servingCert, p.servingKey); err != nil {
		return nil, fmt.Errorf("write serving certificate: %w", err)
	}

	clients := []struct {
		user      user.Info
		cert, key string
	}{
		{&user.DefaultInfo{Name: "admin", Groups: []string{"system:masters"}}, p.adminCert, p.adminKey},
		{&user.DefaultInfo{Name: "system:kube-controller-manager"}, p.kcmCert, p.kcmKey},
		{&user.DefaultInfo{Name: "system:kube-scheduler"}, p.schedulerCert, p.schedulerKey},
	}
	for _, c := range clients {
		if err := issueClient(ca, c.user, c.cert, c.key); err != nil {
			return nil, err
		}
	}

	if err := writeServiceAccountKeys(p.saKey, p.saPub); err != nil {
		return nil, err
	}
	return p, nil
}

// newCA creates a self-signed CA and writes its certificate and key.
func newCA(commonName, certPath, keyPath string) (*crypto.CA, error) {
	cfg, err := crypto.NewSigningCertificate(commonName, leafKeys, crypto.WithLifetime(certValidity))
	if err != nil {
		return nil, fmt.Errorf("create CA %s: %w", commonName, err)
	}
	if err := cfg.WriteCertConfigFile(certPath, keyPath); err != nil {
		return nil, fmt.Errorf("write CA %s: %w", commonName, err)
	}
	return &crypto.CA{Config: cfg, SerialGenerator: &crypto.RandomSerialGenerator{}}, nil
}

// issueClient signs a client certificate for u (its groups become the
// subject's organizations) and writes certificate and key.
func issueClient(ca *crypto.CA, u user.Info, certPath, keyPath string) error {
	cfg, err := ca.NewClientCertificate(u, leafKeys, crypto.WithLifetime(certValidity))
	if err != nil {
		return fmt.Errorf("issue client certificate %s: %w", u.GetName(), err)
	}
	if err := cfg.WriteCertConfigFile(certPath, keyPath); err != nil {
		return fmt.Errorf("write client certificate %s: %w", u.GetName(), err)
	}
	return nil
}

func writeServiceAccountKeys(keyPath, pubPath string) error {
	public, private, err := crypto.RSAKeyPairGenerator{Bits: 2048}.GenerateKeyPair()
	if err != nil {
		return fmt.Errorf("generate service-account key: %w", err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(private)
	if err != nil {
		return fmt.Errorf("encode service-account key: %w", err)
	}
	if err := keyutil.WriteKey(keyPath, keyPEM); err != nil {
		return fmt.Errorf("write service-account key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(public)
	if err != nil {
		return fmt.Errorf("encode service-account public key: %w", err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: keyutil.PublicKeyBlockType, Bytes: pubDER})
	if err := os.WriteFile(pubPath, pubPEM, 0o644); err != nil {
		return fmt.Errorf("write service-account public key: %w", err)
	}
	return nil
}
