"""Clients of the cluster sdk_cluster_test.sh started: alice's and bob's keys from the
environment, the endpoint and CA from the config file cluster.sh wrote (TESSERA_CONFIG)."""

import os

import pytest

import tessera_sdk


def _client(variable: str) -> tessera_sdk.Client:
    key = os.environ.get(variable)
    if not key:
        pytest.fail(f"{variable} is not set: run this through sdk_cluster_test.sh")
    return tessera_sdk.connect(api_key=key)


@pytest.fixture(scope="session")
def alice():
    with _client("TESSERA_SDK_TEST_ALICE_KEY") as client:
        yield client


@pytest.fixture(scope="session")
def bob():
    with _client("TESSERA_SDK_TEST_BOB_KEY") as client:
        yield client
