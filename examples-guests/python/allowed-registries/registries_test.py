"""Tests of `registries` (run: `python3 -m unittest registries_test` in this directory)."""

import unittest

from registries import admitted, image_name, parse_allowed


class ImageName(unittest.TestCase):
    def test_bare_names_are_docker_hub_library_images(self):
        self.assertEqual(image_name("nginx"), "docker.io/library/nginx")
        self.assertEqual(image_name("nginx:1.27"), "docker.io/library/nginx")
        self.assertEqual(image_name("bitnami/redis:7"), "docker.io/bitnami/redis")
        self.assertEqual(image_name("index.docker.io/library/nginx"), "docker.io/library/nginx")

    def test_a_first_component_with_a_dot_or_port_or_localhost_is_the_registry(self):
        self.assertEqual(image_name("ghcr.io/acme/app:v1"), "ghcr.io/acme/app")
        self.assertEqual(image_name("localhost:5000/app:dev"), "localhost:5000/app")
        self.assertEqual(image_name("localhost/app"), "localhost/app")
        self.assertEqual(image_name("Registry.Example.com/x"), "registry.example.com/x")
        self.assertEqual(image_name("quay.io/a/b@sha256:" + "0" * 64), "quay.io/a/b")
        self.assertEqual(image_name("quay.io/a/b:1@sha256:" + "0" * 64), "quay.io/a/b")

    def test_what_is_no_reference_is_none(self):
        for bad in ["", " ", "a b", "x\n", "ghcr.io/", "ghcr.io//x", ":tag", "a" * 5000]:
            self.assertIsNone(image_name(bad), bad)


class Allowed(unittest.TestCase):
    def test_entries_one_per_line_with_comments(self):
        text = "# trusted\n  ghcr.io/acme/ \n\nregistry.k8s.io  # upstream\ndocker.io/library\nnginx\n"
        self.assertEqual(
            parse_allowed(text),
            ["ghcr.io/acme", "registry.k8s.io", "docker.io/library", "docker.io/library/nginx"],
        )

    def test_a_prefix_admits_at_a_slash_only(self):
        allowed = parse_allowed("ghcr.io/acme\nregistry.example.com\ndocker.io/library")
        self.assertTrue(admitted("ghcr.io/acme/app", allowed))
        self.assertFalse(admitted("ghcr.io/acme-corp/app", allowed))
        self.assertTrue(admitted("registry.example.com/team/app", allowed))
        self.assertFalse(admitted("registry.example.com.evil.io/app", allowed))
        self.assertTrue(admitted(image_name("nginx:1.27"), allowed))
        self.assertFalse(admitted(image_name("bitnami/redis"), allowed))
        self.assertFalse(admitted("docker.io/library/nginx", []))


if __name__ == "__main__":
    unittest.main()
