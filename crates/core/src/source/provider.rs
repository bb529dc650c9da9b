//! The Git providers tether talks with, named once for both directions: the webhooks
//! they send (a branch moved) and the commit statuses they receive (what the cluster
//! runs). Configuration spells them as Flux's notification-controller does
//! (`github`, `gitlab`, `gitea`, `bitbucket`, `bitbucketserver`, `azuredevops`).

use serde::{Deserialize, Serialize};

/// A Git provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// GitHub and GitHub Enterprise.
    Github,
    /// GitLab (gitlab.com and self-managed).
    Gitlab,
    /// Gitea, Forgejo and Gogs: one webhook format, one statuses API.
    Gitea,
    /// Bitbucket Cloud. Its webhook endpoint reads Bitbucket Server / Data Center
    /// deliveries too (one secret for both).
    Bitbucket,
    /// Bitbucket Server / Data Center: its own build-status API.
    BitbucketServer,
    /// Azure DevOps Services and Server (Azure Repos).
    AzureDevops,
    /// Any other sender of `{"repository": …, "ref": …}`; it has no status API.
    Generic,
}

impl Provider {
    /// The name configuration, metrics and routes use (`/webhooks/<name>`).
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Github => "github",
            Provider::Gitlab => "gitlab",
            Provider::Gitea => "gitea",
            Provider::Bitbucket => "bitbucket",
            Provider::BitbucketServer => "bitbucketserver",
            Provider::AzureDevops => "azuredevops",
            Provider::Generic => "generic",
        }
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Azure DevOps Services' host for https clones and the REST API.
const AZURE_DEVOPS_HOST: &str = "dev.azure.com";
/// Azure DevOps Services' host for ssh clones (`git@ssh.dev.azure.com:v3/org/project/repo`).
const AZURE_DEVOPS_SSH_HOST: &str = "ssh.dev.azure.com";
/// The hosts of the older `https://{org}.visualstudio.com` URLs end in this.
const VISUALSTUDIO_SUFFIX: &str = ".visualstudio.com";

/// An Azure Repos repository as its URLs name it: organization (or, on Azure DevOps
/// Server, collection), project and repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AzureRepo {
    pub organization: String,
    pub project: String,
    pub repository: String,
    /// Hosted by Azure DevOps Services (dev.azure.com, *.visualstudio.com), whose
    /// https and ssh URLs are known; Azure DevOps Server's are the operator's.
    pub cloud: bool,
}

impl AzureRepo {
    /// Reads any URL Azure Repos gives out: `https://[user@]dev.azure.com/{org}/{project}/_git/{repo}`,
    /// `https://{org}.visualstudio.com/[DefaultCollection/]{project}/_git/{repo}`,
    /// `git@ssh.dev.azure.com:v3/{org}/{project}/{repo}`, and Azure DevOps Server's
    /// `https://host/tfs/{collection}/{project}/_git/{repo}`. A URL without a project
    /// (`…/{org}/_git/{repo}`) names the project of the repository's name, as Azure
    /// DevOps reads it.
    pub fn from_url(url: &str) -> Option<AzureRepo> {
        let (host, path) = host_and_path(url)?;
        let segments: Vec<&str> = path
            .trim_matches('/')
            .split('/')
            .filter(|s| !s.is_empty())
            .collect();
        let visualstudio = host
            .strip_suffix(VISUALSTUDIO_SUFFIX)
            .filter(|org| !org.is_empty() && !org.contains('.'));
        let cloud = host == AZURE_DEVOPS_HOST || visualstudio.is_some();
        let at = |i: usize| segments.get(i).map(|s| s.to_string());
        if let Some(git) = segments.iter().position(|s| *s == "_git") {
            let repository = at(git + 1)?;
            let before = &segments[..git];
            let (organization, project) = match (visualstudio, before) {
                (Some(org), [.., project])
                    if !project.eq_ignore_ascii_case("DefaultCollection") =>
                {
                    (org.to_string(), project.to_string())
                }
                (Some(org), _) => (org.to_string(), repository.clone()),
                (None, [.., org, project]) => (org.to_string(), project.to_string()),
                (None, [org]) => (org.to_string(), repository.clone()),
                (None, []) => return None,
            };
            return Some(AzureRepo {
                organization,
                project,
                repository,
                cloud,
            });
        }
        let ssh = host == AZURE_DEVOPS_SSH_HOST || host == "vs-ssh.visualstudio.com";
        match segments.as_slice() {
            ["v3", org, project, repo] if ssh => Some(AzureRepo {
                organization: org.to_string(),
                project: project.to_string(),
                repository: repo.strip_suffix(".git").unwrap_or(repo).to_string(),
                cloud: true,
            }),
            _ => None,
        }
    }

    /// The https and ssh URLs Azure DevOps Services clones this repository by, so a
    /// source configured by either is found from the other. None on Azure DevOps
    /// Server, whose URLs only the operator knows.
    pub fn cloud_urls(&self) -> Vec<String> {
        if !self.cloud {
            return Vec::new();
        }
        let AzureRepo {
            organization: org,
            project,
            repository: repo,
            ..
        } = self;
        vec![
            format!("https://{AZURE_DEVOPS_HOST}/{org}/{project}/_git/{repo}"),
            format!("ssh://git@{AZURE_DEVOPS_SSH_HOST}/v3/{org}/{project}/{repo}"),
        ]
    }
}

/// The lowercase host and the path of a URL or of git's `user@host:path` form.
fn host_and_path(url: &str) -> Option<(String, String)> {
    let url = url.trim();
    if url.contains("://") {
        let parsed = url::Url::parse(url).ok()?;
        return Some((
            parsed.host_str()?.to_ascii_lowercase(),
            parsed.path().to_string(),
        ));
    }
    let (before, path) = url.split_once(':')?;
    if before.is_empty() || before.contains('/') {
        return None;
    }
    let host = before.rsplit_once('@').map_or(before, |(_, h)| h);
    Some((host.to_ascii_lowercase(), path.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(org: &str, project: &str, repository: &str, cloud: bool) -> Option<AzureRepo> {
        Some(AzureRepo {
            organization: org.into(),
            project: project.into(),
            repository: repository.into(),
            cloud,
        })
    }

    #[test]
    fn azure_repos_are_read_from_every_url_azure_devops_gives_out() {
        let cases = [
            (
                "https://fabrikam@dev.azure.com/fabrikam/Fiber/_git/web",
                repo("fabrikam", "Fiber", "web", true),
            ),
            (
                "git@ssh.dev.azure.com:v3/fabrikam/Fiber/web",
                repo("fabrikam", "Fiber", "web", true),
            ),
            (
                "ssh://git@ssh.dev.azure.com/v3/fabrikam/Fiber/web",
                repo("fabrikam", "Fiber", "web", true),
            ),
            (
                "https://fabrikam.visualstudio.com/DefaultCollection/_git/web",
                repo("fabrikam", "web", "web", true),
            ),
            (
                "https://fabrikam.visualstudio.com/Fiber/_git/web",
                repo("fabrikam", "Fiber", "web", true),
            ),
            (
                "https://dev.azure.com/fabrikam/_git/web",
                repo("fabrikam", "web", "web", true),
            ),
            (
                "https://tfs.example.com/tfs/Main/Fiber/_git/web",
                repo("Main", "Fiber", "web", false),
            ),
            ("https://github.com/acme/shop.git", None),
            ("https://dev.azure.com/_git/web", None),
        ];
        for (url, want) in cases {
            assert_eq!(AzureRepo::from_url(url), want, "{url}");
        }
        let cloud = AzureRepo::from_url("https://fabrikam.visualstudio.com/Fiber/_git/web")
            .expect("a repo");
        assert_eq!(
            cloud.cloud_urls(),
            [
                "https://dev.azure.com/fabrikam/Fiber/_git/web",
                "ssh://git@ssh.dev.azure.com/v3/fabrikam/Fiber/web"
            ]
        );
        let server = AzureRepo::from_url("https://tfs.example.com/tfs/Main/Fiber/_git/web");
        assert!(server.expect("a repo").cloud_urls().is_empty());
    }

    #[test]
    fn configuration_names_are_the_display_names() {
        for provider in [
            Provider::Github,
            Provider::Gitlab,
            Provider::Gitea,
            Provider::Bitbucket,
            Provider::BitbucketServer,
            Provider::AzureDevops,
            Provider::Generic,
        ] {
            let yaml = provider.as_str();
            let read: Provider = serde_saphyr::from_str(yaml).expect(yaml);
            assert_eq!(read, provider);
            assert_eq!(provider.to_string(), yaml);
        }
    }
}
