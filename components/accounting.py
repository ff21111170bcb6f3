"""Accounting: slurmdbd and its database."""

from __future__ import annotations

import pulumi
import pulumi_random as random

from sunk import naming
from sunk.manifests.accounting import mariadb_manifests, setup_job, slurmdbd_manifests
from sunk.manifests.auth import AuthRefs, db_secret_name, empty_secret
from sunk.manifests.config import DB_PASSWORD_KEY, DB_ROOT_PASSWORD_KEY
from sunk.spec.cluster import ClusterSpec

from ._k8s import child, create


class Accounting(pulumi.ComponentResource):
    """slurmdbd (Deployment and Service `<cluster>-accounting`) on an in-cluster MariaDB
    (StatefulSet, PVC, and a Secret with generated passwords) or on the external database of the
    spec (password from the referenced Secret). A Job registers the cluster and creates the QOS.

    slurmdbd.conf in the ConfigMap holds no password: slurmdbd's start script appends
    StoragePass from the mounted Secret to a private copy (sunk.manifests.scripts)."""

    host: pulumi.Output[str]
    """The slurmdbd Service (AccountingStorageHost)."""

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        *,
        namespace: pulumi.Input[str],
        refs: AuthRefs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("sunk:index:Accounting", name, None, opts)
        db: list[pulumi.Resource] = []
        if refs.generate_db:
            # Alphanumeric: the password ends up in a `Key=Value` line of slurmdbd.conf.
            user = random.RandomPassword(f"{name}-db-password", length=32, special=False, opts=child(self))
            root = random.RandomPassword(f"{name}-db-root-password", length=32, special=False, opts=child(self))
            db.append(
                create(
                    f"{name}-db-secret",
                    empty_secret(spec, db_secret_name(spec), "mariadb"),
                    child(self),
                    namespace=namespace,
                    string_data={
                        DB_PASSWORD_KEY: pulumi.Output.secret(user.result),
                        DB_ROOT_PASSWORD_KEY: pulumi.Output.secret(root.result),
                    },
                )
            )
            claim, service, sts = mariadb_manifests(spec)
            db.append(create(f"{name}-db-data", claim, child(self), namespace=namespace))
            db.append(create(f"{name}-db-service", service, child(self), namespace=namespace))
            db.append(create(f"{name}-mariadb", sts, child(self, depends_on=list(db)), namespace=namespace))
        deployment, service = slurmdbd_manifests(spec, refs)
        dbd = create(f"{name}-slurmdbd", deployment, child(self, depends_on=db), namespace=namespace)
        svc = create(f"{name}-service", service, child(self), namespace=namespace)
        create(f"{name}-setup", setup_job(spec, refs), child(self, depends_on=[dbd, svc]), namespace=namespace)
        self.host = pulumi.Output.from_input(naming.accounting(spec))
        self.register_outputs({"host": self.host})
