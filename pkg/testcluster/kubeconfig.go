package testcluster

import (
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes a self-contained kubeconfig (certificates embedded) for
// the client certificate at certPath/keyPath.
func writeKubeconfig(path, server string, caPEM []byte, user, certPath, keyPath string) error {
	cert, err := os.ReadFile(certPath)
	if err != nil {
		return fmt.Errorf("read client certificate: %w", err)
	}
	key, err := os.ReadFile(keyPath)
	if err != nil {
		return fmt.Errorf("read client key: %w", err)
	}
	const name = "testcluster"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user}
	cfg.CurrentContext = name
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// adminRESTConfig returns a client configuration with the admin certificate. The
// limits are raised above client-go's defaults: tests create objects in bursts.
func adminRESTConfig(server string, p *pki) (*rest.Config, error) {
	cert, err := os.ReadFile(p.adminCert)
	if err != nil {
		return nil, fmt.Errorf("read admin certificate: %w", err)
	}
	key, err := os.ReadFile(p.adminKey)
	if err != nil {
		return nil, fmt.Errorf("read admin key: %w", err)
	}
	return &rest.Config{
		Host: server,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   p.caPEM,
			CertData: cert,
			KeyData:  key,
		},
		QPS:   100,
		Burst: 200,
	}, nil
}
