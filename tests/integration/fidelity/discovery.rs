//! Discovery against the recording: the documents and the aggregated discovery serve
//! the recorded group versions.

use super::*;

#[tokio::test]
async fn discovery_matches_the_recorded_documents() {
    let sandbox = TestSandbox::start().await;
    let mut tally = Tally::default();
    for name in DISCOVERY {
        let recorded = fixture(name);
        let path = recorded["request"]["path"].as_str().unwrap_or_default();
        let answer = replay(&sandbox, name, &recorded, path).await;
        tally.compare(
            name,
            &recorded["response"]["status"],
            &recorded["response"]["body"],
            &answer,
        );
    }
    tally.finish("discovery");

    // The narrowed group list: every group version served is one the real server
    // lists, with the same preferred version where that one is served.
    let recorded = fixture("discovery/apis")["response"]["body"]["groups"].clone();
    let served = sandbox.get("/apis").await.json()["groups"].clone();
    let served = served.as_array().expect("groups");
    assert!(served.len() >= 8, "the built-in groups: {served:?}");
    for group in served {
        let name = &group["name"];
        let real = recorded
            .as_array()
            .and_then(|groups| groups.iter().find(|g| &g["name"] == name))
            .unwrap_or_else(|| panic!("{name} is a real group"));
        for version in group["versions"].as_array().expect("versions") {
            assert!(
                real["versions"]
                    .as_array()
                    .is_some_and(|v| v.contains(version)),
                "{version} of {name}"
            );
        }
        if group["versions"]
            .as_array()
            .is_some_and(|v| v.contains(&real["preferredVersion"]))
        {
            assert_eq!(
                group["preferredVersion"], real["preferredVersion"],
                "{name}"
            );
        }
    }
}

#[tokio::test]
async fn aggregated_discovery_serves_the_recorded_group_versions() {
    let sandbox = TestSandbox::start().await;
    let recorded = fixture("discovery/aggregated-apis");
    let path = recorded["request"]["path"].as_str().unwrap_or_default();
    let answer = replay(&sandbox, "discovery/aggregated-apis", &recorded, path).await;
    assert_eq!(answer.status, 200);
    assert_eq!(
        answer.content_type,
        recorded["response"]["contentType"]
            .as_str()
            .unwrap_or_default(),
        "the content type tells clients the document is aggregated"
    );
    let served = answer.json();
    let items = served["items"].as_array().expect("items");
    assert!(items.len() >= 8, "the built-in groups: {items:?}");
    // Every group version served is exactly the one recorded.
    for item in items {
        let name = &item["metadata"]["name"];
        let real = recorded["response"]["body"]["items"]
            .as_array()
            .and_then(|items| items.iter().find(|i| &i["metadata"]["name"] == name))
            .unwrap_or_else(|| panic!("{name} is a real group"));
        for version in item["versions"].as_array().expect("versions") {
            let real_version = real["versions"]
                .as_array()
                .and_then(|v| v.iter().find(|v| v["version"] == version["version"]))
                .unwrap_or_else(|| panic!("{name} {} is a real version", version["version"]));
            let mut found = Vec::new();
            differences("", real_version, version, &mut found);
            assert!(found.is_empty(), "{name} {}: {found:?}", version["version"]);
        }
    }

    // Without asking for it, the legacy document.
    let legacy = sandbox.get("/apis").await;
    assert_eq!(legacy.content_type, "application/json");
    assert_eq!(legacy.json()["kind"], "APIGroupList");
}
